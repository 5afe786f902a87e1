% Pattern: a repository's flood-severity forecaster (comments translated): an Excel sheet read
% with readtable, columns taken with table2array, standardised by a helper from another file that
% returns three outputs, 30-step windows cut in a loop into a cell array (transposed with .'),
% a learned positionEmbeddingLayer added to the input through connectLayers(..., 'add/in2'), two
% selfAttentionLayers (the first with AttentionMask 'causal'), indexing1dLayer('last') and a
% regressionLayer; the options built from variables; trainNetwork or load behind a flag named
% `train`; predictions de-standardised; figures with xlim and ylim assigned as variables,
% scatter, subplot, histogram, set(gca, ...); `clear`, `clc`, `warning off` at the top.
% Source: GitHub repository.
% MATLAB: clean, 8 layers (attnlab: 7, the regression output becomes the loss); numChannels is
% size(features, 2) of the sheet. With 4 channels: position embedding 4*256 = 1,024, each
% selfAttention(4, 128) on 4 channels 3*(128*4 + 128) + (4*128 + 4) = 2,436, fc(1) 5: 5,901.
% Expect: exit 2 "--set numChannels=VALUE"
% Expect-with: --set numChannels=4 -> exit 0 "7 layers" "no issues" learnables=5901
clear
clc
warning off

% read the data
data = readtable('flood_summary.xlsx');
features = table2array(data(:, [2, 3, 4, 5]));
target = table2array(data(:, 6));

% standardise per column
[featuresNorm, muF, sigmaF] = standardizeByCol(features);
[targetNorm, muT, sigmaT] = standardizeByCol(target);

windowSize = 30;
nrows = size(featuresNorm, 1) - windowSize;

featuresAll = cell(nrows, 1);
for row = 1:nrows
    featuresAll{row} = featuresNorm(row:windowSize + row - 1, :).';
end
responseAll = targetNorm(windowSize + 1:end);

numChannels = size(features, 2);
maxPosition = 256;
numHeads = 4;
numKeyChannels = numHeads * 32;

layers = [
    sequenceInputLayer(numChannels, Name='input')
    positionEmbeddingLayer(numChannels, maxPosition, Name='pos-emb')
    additionLayer(2, Name='add')
    selfAttentionLayer(numHeads, numKeyChannels, 'AttentionMask', 'causal')
    selfAttentionLayer(numHeads, numKeyChannels)
    indexing1dLayer('last')
    fullyConnectedLayer(1)
    regressionLayer
];

lgraph = layerGraph(layers);
lgraph = connectLayers(lgraph, 'input', 'add/in2');

maxEpochs = 300;
miniBatchSize = 64;
learningRate = 0.0095;
solver = 'adam';
shuffle = 'every-epoch';
gradientThreshold = 10;
executionEnvironment = 'auto';

options = trainingOptions(solver, ...
    'Plots', 'training-progress', ...
    'MaxEpochs', maxEpochs, ...
    'MiniBatchSize', miniBatchSize, ...
    'Shuffle', shuffle, ...
    'InitialLearnRate', learningRate, ...
    'GradientThreshold', gradientThreshold, ...
    'ExecutionEnvironment', executionEnvironment);

train = true;
if train
    net = trainNetwork(featuresAll, responseAll, lgraph, options);
else
    load flood_transformer_model.mat net
end

yPredAll = predict(net, featuresAll);

% back to the original scale
predictAll = yPredAll * sigmaT + muT;
actualAll = responseAll * sigmaT + muT;

% predictions against the measured series
figure;
plot(1:length(predictAll), predictAll, 'r--', 'DisplayName', 'Predicted value', 'LineWidth', 1.5);
xlabel('Day', 'FontSize', 14, 'FontName', 'Times New Roman');
ylabel('Flood severity', 'FontSize', 14, 'FontName', 'Times New Roman');
title('Flood severity prediction', 'FontSize', 16, 'FontWeight', 'bold');
legend('show');
grid on;
set(gca, 'FontSize', 12, 'LineWidth', 1.5, 'FontName', 'Times New Roman');

% predicted against true
figure;
scatter(actualAll, predictAll, 50, 'filled', 'MarkerFaceColor', [0.2 0.6 0.8], 'MarkerEdgeColor', [0.1 0.4 0.6]);
hold on;
xlim = [min([actualAll; predictAll]) max([actualAll; predictAll])];
ylim = xlim;
plot(xlim, ylim, 'k--', 'LineWidth', 1.5);
xlabel('True level', 'FontSize', 14);
ylabel('Predicted level', 'FontSize', 14);
legend('Predicted vs true', 'y = x', 'Location', 'Best');
grid on;
box on;

% residuals
residuals = actualAll - predictAll;
figure;
subplot(1, 2, 1);
scatter(predictAll, residuals, 50, 'filled', 'MarkerFaceColor', [0.2 0.6 0.8]);
xlabel('Predicted value', 'FontSize', 14);
ylabel('Residuals', 'FontSize', 14);
grid on;
subplot(1, 2, 2);
histogram(residuals, 30, 'FaceColor', [0.2 0.6 0.8], 'EdgeColor', [0.1 0.4 0.6], 'LineWidth', 1.5);
xlabel('Residuals', 'FontSize', 14);
ylabel('Frequency', 'FontSize', 14);
grid on;
