% Pattern: the classic "Sequence Classification Using Deep Learning" script shape.
% MATLAB: trainNetwork returns a trained SeriesNetwork; the network the script built is the
% layer array 'layers' (MATLAB's analyzeNetwork(layers) reports it clean).
[XTrain, YTrain] = japaneseVowelsTrainData;
numFeatures = 12;
numHiddenUnits = 100;
numClasses = 9;

layers = [ ...
    sequenceInputLayer(numFeatures)
    lstmLayer(numHiddenUnits, 'OutputMode', 'last')
    fullyConnectedLayer(numClasses)
    softmaxLayer
    classificationLayer];

maxEpochs = 1;           % 70 in the example; one epoch is enough here
miniBatchSize = 27;
options = trainingOptions('adam', ...
    'ExecutionEnvironment', 'cpu', ...
    'GradientThreshold', 1, ...
    'MaxEpochs', maxEpochs, ...
    'MiniBatchSize', miniBatchSize, ...
    'SequenceLength', 'longest', ...
    'Shuffle', 'never', ...
    'Verbose', 0, ...
    'Plots', 'none');            % 'training-progress' in the example

net = trainNetwork(XTrain, YTrain, layers, options);

[XTest, YTest] = japaneseVowelsTestData;
YPred = classify(net, XTest, 'MiniBatchSize', miniBatchSize, 'SequenceLength', 'longest');
acc = sum(YPred == YTest) ./ numel(YTest)
