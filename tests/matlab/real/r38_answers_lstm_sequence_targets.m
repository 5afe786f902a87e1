% Pattern: a MATLAB Answers question ("LSTM Input and Output Dimension Problem"): a univariate
% series cut into 9600 windows of 20 points, each window to predict the point after it, X a
% cell array of 1-by-20 rows and Y a numeric vector filled in a loop; the network keeps
% lstmLayer's default OutputMode "sequence", and trainnet with "mse" stops with "Size of
% predictions and targets must match. Size of predictions: 1(C) x 128(B) x 20(T). Size of
% targets: 1(C) x 128(B) x 1(T)". The answer: OutputMode="last". (Series generated with sin as
% in the answer.)
% Source: MATLAB Answers.
% MATLAB: the network itself is clean (analyzeNetwork reports nothing; the mismatch shows only
% when training meets the targets), 3 layers; lstm(128) on one channel 4*128*(1 + 128) + 4*128
% = 66,560, fc 129: 66,689 learnables.
% Expect: exit 0 "3 layers" "no issues" learnables=66689
data = sin(0:0.01:100)';
numTimeSteps = 20;
numSamples = 9600;
numChannels = 1;
numResponses = 1;
numHiddenUnits = 128;

X = cell(numSamples, 1);
Y = zeros(numSamples, 1);
for i = 1:numSamples
    X{i} = data(i:i + numTimeSteps - 1)';
    Y(i) = data(i + numTimeSteps);
end

layers = [
    sequenceInputLayer(numChannels)
    lstmLayer(numHiddenUnits)
    fullyConnectedLayer(numResponses)];

options = trainingOptions("adam", ...
    MaxEpochs=50, ...
    MiniBatchSize=128, ...
    Shuffle="every-epoch", ...
    Plots="training-progress", ...
    Verbose=false);

net = trainnet(X, Y, layers, "mse", options);
