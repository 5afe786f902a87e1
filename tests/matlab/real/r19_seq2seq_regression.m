% Pattern: "Sequence-to-Sequence Regression Using Deep Learning" (turbofan RUL): per-feature
% normalisation over a cell array, clipped responses, sequences sorted by length, an LSTM
% regression network trained with trainNetwork and a regressionLayer.
% MATLAB: the network is sequenceinput-lstm-fc-dropout-fc-regressionoutput, clean.
filenamePredictors = fullfile(dataFolder, "train_FD001.txt");
[XTrain, YTrain] = processTurboFanDataTrain(filenamePredictors);
m = min([XTrain{:}], [], 2);
M = max([XTrain{:}], [], 2);
idxConstant = M == m;
for i = 1:numel(XTrain)
    XTrain{i}(idxConstant, :) = [];
end
numFeatures = size(XTrain{1}, 1);
mu = mean([XTrain{:}], 2);
sig = std([XTrain{:}], 0, 2);
for i = 1:numel(XTrain)
    XTrain{i} = (XTrain{i} - mu) ./ sig;
end
thr = 150;
for i = 1:numel(YTrain)
    YTrain{i}(YTrain{i} > thr) = thr;
end
for i = 1:numel(XTrain)
    sequence = XTrain{i};
    sequenceLengths(i) = size(sequence, 2);
end
[sequenceLengths, idx] = sort(sequenceLengths, 'descend');
XTrain = XTrain(idx);
YTrain = YTrain(idx);

numResponses = size(YTrain{1}, 1);
numHiddenUnits = 200;
layers = [ ...
    sequenceInputLayer(numFeatures)
    lstmLayer(numHiddenUnits, 'OutputMode', 'sequence')
    fullyConnectedLayer(50)
    dropoutLayer(0.5)
    fullyConnectedLayer(numResponses)
    regressionLayer];
maxEpochs = 60;
miniBatchSize = 20;
options = trainingOptions('adam', ...
    'MaxEpochs', maxEpochs, ...
    'MiniBatchSize', miniBatchSize, ...
    'InitialLearnRate', 0.01, ...
    'GradientThreshold', 1, ...
    'Shuffle', 'never', ...
    'Plots', 'training-progress', ...
    'Verbose', 0);
net = trainNetwork(XTrain, YTrain, layers, options);
