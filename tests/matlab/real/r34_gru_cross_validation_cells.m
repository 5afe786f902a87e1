% Pattern: a repository's GRU classifier of audio features evaluated with ten random hold-outs:
% the feature cells of three splits stacked, labels read from audio datastores (after their
% first use), three stacked gruLayers with dropout and a classificationLayer; net = {},
% net{i} = trainNetwork(X(train), Y(train), ...) and p{i} = classify(net{i}, ...) in the loop,
% crossvalind, cellstr, classperf on a variable the caller has, bare expressions that display
% values (`i`, `cp.ErrorRate`), [p{:}], reshape, confusionchart, tic/toc.
% Source: GitHub repository.
% MATLAB: the layer array is clean, 10 layers (attnlab: 9, the classification output becomes
% the loss); InputSize comes from the first feature matrix and numclasses from the labels. With
% InputSize = 40 and numclasses = 10 MATLAB counts gru(500) 3*500*(40 + 500) + 3*500 = 811,500,
% gru(300) 3*300*(500 + 300) + 900 = 720,900, gru(200) 3*200*(300 + 200) + 600 = 300,600,
% fc 2,010: 1,835,010 learnables.
% Expect: exit 2 "--set InputSize=VALUE" "--set numclasses=VALUE"
% Expect-with: --set InputSize=40 --set numclasses=10 -> exit 0 "9 layers" "no issues" learnables=1835010
X = [TrainFeatures; TestFeatures; ValFeatures];
Y = [Ytrain; Ytest; Yval];
N = length(X);
[InputSize, ~] = size(TrainFeatures{1});
Ytrain = adsTrain.Labels;
Yval = adsVal.Labels;
Ytest = adsTest.Labels;

numhiddenunits1 = 500;
numhiddenunits2 = 300;
numhiddenunits3 = 200;
numclasses = numel(unique(Ytrain));

layersGRU = [ ...
    sequenceInputLayer(InputSize)
    gruLayer(numhiddenunits1, 'OutputMode', 'sequence')
    dropoutLayer(0.5)
    gruLayer(numhiddenunits2, 'OutputMode', 'sequence')
    dropoutLayer(0.5)
    gruLayer(numhiddenunits3, 'OutputMode', 'last')
    dropoutLayer(0.5)
    fullyConnectedLayer(numclasses)
    softmaxLayer
    classificationLayer];

maxEpochs = 300;
miniBatchSize = 50;
options = trainingOptions('adam', ...
    'InitialLearnRate', 0.0035, ...
    'MaxEpochs', maxEpochs, ...
    'MiniBatchSize', miniBatchSize, ...
    'Verbose', false, ...
    'Plots', 'training-progress');

cp = classperf(C);

net = {};
p = {};
yyy = {};
testAccuracy = {};
M = 10;
tic
for i = 1:10
    i
    [train, test] = crossvalind('LeaveMOut', N, ceil(N/M));
    net{i} = trainNetwork(X(train), Y(train), layersGRU, options);
    p{i} = classify(net{i}, X(test));
    yyy{i} = Y(test);
    testAccuracy{i} = sum(p{i} == yyy{i}) / numel(p{i}) * 100;
    pp = cellstr(p{i});
    classperf(cp, pp, test);
end
cp.ErrorRate
p = [p{:}];
allPredicted = reshape(p, [335*i, 1]);
yyy = [yyy{:}];
allTrue = reshape(yyy, [335*i, 1]);
cm = confusionchart(allTrue, allPredicted);
toc
