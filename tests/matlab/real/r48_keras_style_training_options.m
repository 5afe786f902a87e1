% Pattern: a first MATLAB LSTM classifier written by someone coming from Keras: the data from a
% .mat file, sequences sorted by length, a clean network — and trainingOptions given the Keras
% names 'Epochs' and 'BatchSize', which are not trainingOptions options (MaxEpochs,
% MiniBatchSize), with 'ValidationSplit' after them. (A common question pattern; no single
% thread was found in the stored material, so this one is composed from it.)
% Source: composite of a MATLAB Answers question pattern.
% MATLAB: the network is built (clean: sequenceinput(12)-lstm(64, last)-dropout-fc(9)-softmax-
% classoutput), then trainingOptions stops the script: 'Epochs' is not an option it recognises.
% Expect: exit 2 "Epochs"
load("speakerSequences.mat", "XTrain", "YTrain");

% shortest sequences first, to pad less
sequenceLengths = cellfun(@(x) size(x, 2), XTrain);
[~, order] = sort(sequenceLengths);
XTrain = XTrain(order);
YTrain = YTrain(order);

numFeatures = 12;
numClasses = 9;
layers = [
    sequenceInputLayer(numFeatures)
    lstmLayer(64, 'OutputMode', 'last')
    dropoutLayer(0.2)
    fullyConnectedLayer(numClasses)
    softmaxLayer
    classificationLayer];

options = trainingOptions('adam', ...
    'Epochs', 30, ...
    'BatchSize', 32, ...
    'ValidationSplit', 0.2, ...
    'Verbose', 1);

net = trainNetwork(XTrain, YTrain, layers, options);
YPred = classify(net, XTrain);
accuracy = mean(YPred == YTrain)
