% Pattern: the number of classes read from the data, used in the last layer.
% MATLAB builds the whole network; without the data the reader cannot, and must not report
% the layers it could build ("no issues") as if they were the network: exit 2, naming the
% variable to give (--set numClasses=...).
numFeatures = 3;
classNames = categories(YTrain);
numClasses = numel(classNames);
layers = [
    sequenceInputLayer(numFeatures)
    bilstmLayer(32, OutputMode="last")
    fullyConnectedLayer(numClasses)
    softmaxLayer];
tempLayers = [fullyConnectedLayer(8) reluLayer];
