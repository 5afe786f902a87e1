% Pattern: [net, info] = trainNetwork(...), then clearvars -except net, then plotting.
% MATLAB: trainNetwork's two outputs; clearvars -except keeps 'net'. The network analysed is
% the one trainNetwork was given ('lgraph').
clear; clc; close all;
inputSize = 4;
lgraph = layerGraph([
    featureInputLayer(inputSize, 'Name', 'input')
    fullyConnectedLayer(16, 'Name', 'fc1')
    reluLayer('Name', 'relu1')
    fullyConnectedLayer(1, 'Name', 'fc2')
    regressionLayer('Name', 'out')]);
opts = trainingOptions('sgdm', 'MaxEpochs', 5, 'Verbose', false);
[net, info] = trainNetwork(XTrain, YTrain, lgraph, opts);
clearvars -except net lgraph info
figure;
plot(info.TrainingLoss);
