% Pattern: "Classify Text Data Using Convolutional Neural Network" (factory reports): readtable
% with TextType="string", a categorical column, a histogram of the classes, cvpartition with
% Holdout=, a local preprocessText function (tokenizedDocument, lower, erasePunctuation),
% wordEncoding and doc2sequence, then a dlnetwork built in loops: a wordEmbeddingLayer feeding
% one convolution block per n-gram length (convolution1dLayer, batch normalisation, relu,
% dropout, globalMaxPooling1dLayer, names made with "conv" + N), their outputs joined by a
% concatenationLayer connected through "cat/in" + j; trainnet, minibatchpredict, scores2label.
% Source: MathWorks documentation example.
% MATLAB: clean, 26 layers; numWords (enc.NumWords) and numClasses come from the data. With 100
% words and 4 classes: embedding 100*100 = 10,000; convolutions N*100*200 + 200 for N = 2..5
% (280,800); batch normalisation 4*400; fc 4*800 + 4 = 3,204: 295,604 learnables.
% Expect: exit 2 "--set numWords=VALUE" "--set numClasses=VALUE"
% Expect-with: --set numWords=100 --set numClasses=4 -> exit 0 "26 layers" "no issues" learnables=295604
filename = "factoryReports.csv";
data = readtable(filename, TextType="string");
data.Category = categorical(data.Category);

figure
histogram(data.Category)
xlabel("Class")
ylabel("Frequency")
title("Class Distribution")

cvp = cvpartition(data.Category, Holdout=0.1);
dataTrain = data(training(cvp), :);
dataValidation = data(test(cvp), :);
textDataTrain = dataTrain.Description;
textDataValidation = dataValidation.Description;
TTrain = dataTrain.Category;
TValidation = dataValidation.Category;

documentsTrain = preprocessText(textDataTrain);
documentsValidation = preprocessText(textDataValidation);

enc = wordEncoding(documentsTrain);
sequenceLength = 14;
XTrain = doc2sequence(enc, documentsTrain, Length=sequenceLength);
XValidation = doc2sequence(enc, documentsValidation, Length=sequenceLength);

classNames = unique(data.Category);
numClasses = numel(classNames);
numWords = enc.NumWords;
embeddingDimension = 100;
ngramLengths = [2 3 4 5];
numFilters = 200;
numBlocks = numel(ngramLengths);

net = dlnetwork;
layers = [
    sequenceInputLayer(1, MinLength=sequenceLength, Name="input")
    wordEmbeddingLayer(embeddingDimension, numWords, Name="emb")];
net = addLayers(net, layers);

% one block per n-gram length, each reading the embedding
for j = 1:numBlocks
    N = ngramLengths(j);
    block = [
        convolution1dLayer(N, numFilters, Name="conv" + N, Padding="same")
        batchNormalizationLayer(Name="bn" + N)
        reluLayer(Name="relu" + N)
        dropoutLayer(0.2, Name="drop" + N)
        globalMaxPooling1dLayer(Name="max" + N)];
    net = addLayers(net, block);
    net = connectLayers(net, "emb", "conv" + N);
end

layers = [
    concatenationLayer(1, numBlocks, Name="cat")
    dropoutLayer(0.2, Name="drop")
    fullyConnectedLayer(numClasses, Name="fc")
    softmaxLayer(Name="softmax")];
net = addLayers(net, layers);
for j = 1:numBlocks
    N = ngramLengths(j);
    net = connectLayers(net, "max" + N, "cat/in" + j);
end

options = trainingOptions("adam", ...
    MiniBatchSize=128, ...
    ValidationData={XValidation, TValidation}, ...
    OutputNetwork="best-validation", ...
    Plots="training-progress", ...
    Metrics="accuracy", ...
    Verbose=false);
net = trainnet(XTrain, TTrain, net, "crossentropy", options);

reportsNew = [
    "Loud squeal from the conveyor motor at start of shift."
    "Coolant leaking below the mixer."
    "Sorter stops and blows a fuse every morning."];
documentsNew = preprocessText(reportsNew);
XNew = doc2sequence(enc, documentsNew, Length=sequenceLength);
scores = minibatchpredict(net, XNew);
labelsNew = scores2label(scores, classNames)

function documents = preprocessText(textData)
    documents = tokenizedDocument(textData);
    documents = lower(documents);
    documents = erasePunctuation(documents);
end
