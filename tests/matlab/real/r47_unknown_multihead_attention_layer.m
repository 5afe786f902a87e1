% Pattern: the smartwatch repository's first attempt at a transformer (left commented out there,
% written here as it was first tried): hyperparameters for a 6-block encoder, a local helper
% transformerEncoderLayer(embedDim, numHeads, ffnDim, blockName) that names its layers with
% [blockName, '_add1'] and puts multiheadAttentionLayer(numHeads, embedDim, 'Name', ...) first —
% a name the Deep Learning Toolbox does not have (its attention layers are selfAttentionLayer
% and attentionLayer); the blocks are stacked with layers = [layers; ...] in a loop.
% Source: GitHub repository (commented-out code, made live).
% MATLAB: stops in the helper's first call: "Unrecognized function or variable
% 'multiheadAttentionLayer'." (The additions' second inputs are never connected either; MATLAB
% does not get that far.)
% Expect: exit 2 "multiheadAttentionLayer"
clear all
close all

[num, txt, raw] = xlsread('Smartwatch Data');
age = num(1:end, 2:2);
features = num(1:end, 5:end);
labels = categorical(1 + (age >= 12));

inputSize = [500 1];   % 500 time steps, one channel
numClasses = 2;
embeddingDim = 128;    % token embedding size
numHeads = 8;          % attention heads
ffnDim = 512;          % feed-forward width
numLayers = 6;         % encoder blocks

layers = [
    sequenceInputLayer(inputSize(2), 'Name', 'input')
    fullyConnectedLayer(embeddingDim, 'Name', 'embedding')];
for k = 1:numLayers
    layers = [layers; transformerEncoderLayer(embeddingDim, numHeads, ffnDim, sprintf('enc%d', k))];
end
layers = [layers
    globalAveragePooling1dLayer('Name', 'gap')
    fullyConnectedLayer(numClasses, 'Name', 'fc')
    softmaxLayer('Name', 'softmax')
    classificationLayer('Name', 'output')];

options = trainingOptions('adam', ...
    'MaxEpochs', 50, ...
    'InitialLearnRate', 1e-3, ...
    'Verbose', false, ...
    'Plots', 'training-progress');
XTrain = num2cell(features(1:43, :), 2);
net = trainNetwork(XTrain, labels(1:43), layers, options);

function layers = transformerEncoderLayer(embedDim, numHeads, ffnDim, blockName)
    layers = [
        % multi-head attention
        multiheadAttentionLayer(numHeads, embedDim, 'Name', [blockName, '_multihead_attention'])

        % add & norm 1
        additionLayer(2, 'Name', [blockName, '_add1'])
        layerNormalizationLayer('Name', [blockName, '_norm1'])

        % feed-forward
        fullyConnectedLayer(ffnDim, 'Name', [blockName, '_fc1'])
        reluLayer('Name', [blockName, '_relu'])
        fullyConnectedLayer(embedDim, 'Name', [blockName, '_fc2'])

        % add & norm 2
        additionLayer(2, 'Name', [blockName, '_add2'])
        layerNormalizationLayer('Name', [blockName, '_norm2'])
    ];
end
