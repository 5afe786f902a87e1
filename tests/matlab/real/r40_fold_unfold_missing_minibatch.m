% Pattern: CNN-LSTM state-of-charge estimation as Q&A sites and blogs show it (battery discharge
% records: voltage and current in, SOC out): load of a struct, plotyy, mapminmax to [0, 1], the
% features reshaped into Nfeat-by-1-by-1 frames, a sequenceFoldingLayer before a 2-D convolution
% and a sequenceUnfoldingLayer after it — written without the line
% connectLayers(lgraph, 'fold/miniBatchSize', 'unfold/miniBatchSize') that these layers need
% (sequenceFoldingLayer's page: "you must connect the miniBatchSize output to the miniBatchSize
% input of the corresponding sequence unfolding layer").
% Source: Q&A-site and blog CNN-LSTM scripts (the omission is the commonest question about them).
% MATLAB: analyzeNetwork and trainNetwork report the network invalid: the unfolding layer
% 'unfold' has an unconnected input (miniBatchSize).
% Expect: exit 1 "unfold" "miniBatchSize"
clear all
close all

% training data
load('DST_discharge_data.mat');
trainTime = discharge_data.relativeTime;
trainVoltage = discharge_data.voltage;
trainCurrent = discharge_data.current;
trainSOC = discharge_data.SOC;

figure
[AX, H1, H2] = plotyy(trainTime, trainVoltage, trainTime, trainCurrent);
xlabel('Time (s)')
ylabel(AX(1), 'Voltage (V)')
ylabel(AX(2), 'Current (A)')
title('Training profile')

% normalise inputs and output to [0, 1]
allX = [trainVoltage; trainCurrent];
allY = trainSOC;
[normX, inputps] = mapminmax(allX, 0, 1);
[normY, outputps] = mapminmax(allY, 0, 1);

Nfeat = 2;
numSteps = size(normX, 2);
XTrain = {reshape(normX, [Nfeat 1 1 numSteps])};
YTrain = {normY};

layers = [
    sequenceInputLayer([Nfeat 1 1], 'Name', 'input')
    sequenceFoldingLayer('Name', 'fold')
    convolution2dLayer([2 1], 16, 'Padding', 'same', 'Name', 'conv')
    batchNormalizationLayer('Name', 'bn')
    reluLayer('Name', 'relu')
    sequenceUnfoldingLayer('Name', 'unfold')
    flattenLayer('Name', 'flatten')
    lstmLayer(64, 'Name', 'lstm')
    fullyConnectedLayer(1, 'Name', 'fc')
    regressionLayer('Name', 'output')];
lgraph = layerGraph(layers);

options = trainingOptions('adam', ...
    'MaxEpochs', 200, ...
    'InitialLearnRate', 0.005, ...
    'GradientThreshold', 1, ...
    'Verbose', 0, ...
    'Plots', 'training-progress');
net = trainNetwork(XTrain, YTrain, lgraph, options);

% estimate on the training profile and map back
YPred = predict(net, XTrain);
estimatedSOC = mapminmax('reverse', YPred{1}, outputps);
rmse = sqrt(mean((estimatedSOC - trainSOC).^2))
figure
plot(trainTime, trainSOC, trainTime, estimatedSOC)
legend('Measured SOC', 'Estimated SOC')
