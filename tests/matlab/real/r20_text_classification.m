% Pattern: "Classify Text Data Using Deep Learning": a word encoding, documents as index
% sequences, wordEmbeddingLayer, LSTM, trainnet with cross-entropy.
% MATLAB: wordEmbeddingLayer(dimension, numWords) has Dimension-by-NumWords weights.
documentsTrain = preprocessText(textDataTrain);
enc = wordEncoding(documentsTrain);
sequenceLength = 10;
XTrain = doc2sequence(enc, documentsTrain, Length=sequenceLength);
inputSize = 1;
embeddingDimension = 50;
numHiddenUnits = 80;
numWords = enc.NumWords;
numClasses = numel(categories(TTrain));
layers = [
    sequenceInputLayer(inputSize)
    wordEmbeddingLayer(embeddingDimension, numWords)
    lstmLayer(numHiddenUnits, OutputMode="last")
    fullyConnectedLayer(numClasses)
    softmaxLayer];
options = trainingOptions("adam", MiniBatchSize=16, GradientThreshold=2, Shuffle="every-epoch", ...
    Plots="training-progress", Metrics="accuracy", Verbose=false);
net = trainnet(XTrain, TTrain, layers, "crossentropy", options);
