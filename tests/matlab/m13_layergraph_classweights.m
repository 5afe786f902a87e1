% Sequence classification with a layer graph ending in a weighted classificationLayer,
% written as in MathWorks' examples (legacy trainNetwork workflow).
rng(0)
numFeatures = 3;
numHiddenUnits = 8;
numClasses = 3;

layers = [ ...
    sequenceInputLayer(numFeatures, 'Normalization', 'zscore', 'Name', 'sequence')
    lstmLayer(numHiddenUnits, 'OutputMode', 'last', 'Name', 'lstm')
    fullyConnectedLayer(numClasses, 'Name', 'fc')
    softmaxLayer('Name', 'softmax')];
lgraph = layerGraph(layers);

classes = ["low" "mid" "high"];
classWeights = [1 2 0.5];
lgraph = addLayers(lgraph, classificationLayer('Classes', classes, ...
    'ClassWeights', classWeights, 'Name', 'classoutput'));
lgraph = connectLayers(lgraph, 'softmax', 'classoutput');

options = trainingOptions('adam', ...
    'MaxEpochs', 1, ...
    'MiniBatchSize', 4, ...
    'Shuffle', 'never', ...
    'ExecutionEnvironment', 'cpu', ...
    'Plots', 'none', ...
    'Verbose', false);

[net, info] = trainNetwork(XTrain, categorical(YTrain, classes), lgraph, options);
YPred = scores2label(predict(net, XTrain), classes);
