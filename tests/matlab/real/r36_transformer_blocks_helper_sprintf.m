% Pattern: a repository's transformer classifier for sequences (comments translated), as a
% function file lgraph = defineLFTNet(numFeatures, numClasses): fprintf of a banner, older
% hyperparameters left in comments, an input with zscore normalisation split into a "static"
% and a "dynamic" fully connected branch joined by a concatenationLayer, an embedding
% projection, three pre-norm encoder blocks added by a local helper that names its layers with
% sprintf('enc%d_', blockIdx) and [blockName 'attn'] char concatenation and wires both residual
% additions with connectLayers, the next block reading sprintf('enc%d_add2', i); global average
% and max pooling concatenated, a classification head ending in classificationLayer.
% Source: GitHub repository.
% MATLAB: called with its arguments the layer graph is clean, 51 layers (attnlab: 51 too: the
% classification output becomes the loss, the zscore input normalisation a layer of its own). With numFeatures = 10 and numClasses = 3: branches
% 2*(32*10 + 32 + 64) = 832, embedding 64*64 + 64 + 128 = 4,288, each encoder block 128 +
% selfAttention(4, 64) 4*(64*64 + 64) + 128 + (256*64 + 256) + (64*256 + 64) = 49,984 (three:
% 149,952), final norm 128, head (64*128 + 64) + 128 + (3*64 + 3) = 8,579: 163,779 learnables.
% Expect: exit 2 "--set numFeatures=VALUE"
% Expect-with: --set numFeatures=10 --set numClasses=3 -> exit 0 "51 layers" "no issues" learnables=163779
function lgraph = defineLFTNet(numFeatures, numClasses)
% LFT-Net, larger version for harder data:
% 1. more capacity (embedDim 32 -> 48)
% 2. stronger regularisation (dropout 0.3 -> 0.4)
% 3. two encoder layers

fprintf('Building the enlarged LFT-Net...\n');

% embedDim = 80;      % 48 -> 64
% numHeads = 4;
% ffnDim = 160;       % 96 -> 128
% numEncoders = 3;    % 2 -> 3
% dropout = 0.18;

embedDim = 64;      % back to 64 from 80: more compact features
numHeads = 4;       % 16 channels per head
ffnDim = 256;       % four times embedDim
numEncoders = 3;
dropout = 0.25;

lgraph = layerGraph();

%% 1. input
inputLayer = sequenceInputLayer(numFeatures, 'Name', 'input', 'Normalization', 'zscore');
lgraph = addLayers(lgraph, inputLayer);

%% 2. two projections of the features
staticBranch = [
    fullyConnectedLayer(embedDim/2, 'Name', 'static_proj')
    layerNormalizationLayer('Name', 'static_norm')
    reluLayer('Name', 'static_relu')
    dropoutLayer(0.3, 'Name', 'static_dropout')
];
dynamicBranch = [
    fullyConnectedLayer(embedDim/2, 'Name', 'dynamic_proj')
    layerNormalizationLayer('Name', 'dynamic_norm')
    reluLayer('Name', 'dynamic_relu')
    dropoutLayer(0.3, 'Name', 'dynamic_dropout')
];
lgraph = addLayers(lgraph, staticBranch);
lgraph = addLayers(lgraph, dynamicBranch);
lgraph = connectLayers(lgraph, 'input', 'static_proj');
lgraph = connectLayers(lgraph, 'input', 'dynamic_proj');

concatLayer = concatenationLayer(1, 2, 'Name', 'feature_concat');
lgraph = addLayers(lgraph, concatLayer);
lgraph = connectLayers(lgraph, 'static_dropout', 'feature_concat/in1');
lgraph = connectLayers(lgraph, 'dynamic_dropout', 'feature_concat/in2');

%% 3. embedding
embedLayers = [
    fullyConnectedLayer(embedDim, 'Name', 'embed_proj')
    layerNormalizationLayer('Name', 'embed_norm')
    dropoutLayer(0.2, 'Name', 'embed_drop')
];
lgraph = addLayers(lgraph, embedLayers);
lgraph = connectLayers(lgraph, 'feature_concat', 'embed_proj');

%% 4. encoder blocks
currentLayer = 'embed_drop';
for i = 1:numEncoders
    lgraph = addTransformerBlock(lgraph, currentLayer, i, numHeads, embedDim, ffnDim, dropout);
    currentLayer = sprintf('enc%d_add2', i);
end

%% 5. pooling at two scales
finalLN = layerNormalizationLayer('Name', 'final_ln');
gap = globalAveragePooling1dLayer('Name', 'gap');
gmp = globalMaxPooling1dLayer('Name', 'gmp');
poolConcat = concatenationLayer(1, 2, 'Name', 'pool_concat');
lgraph = addLayers(lgraph, finalLN);
lgraph = addLayers(lgraph, gap);
lgraph = addLayers(lgraph, gmp);
lgraph = addLayers(lgraph, poolConcat);
lgraph = connectLayers(lgraph, currentLayer, 'final_ln');
lgraph = connectLayers(lgraph, 'final_ln', 'gap');
lgraph = connectLayers(lgraph, 'final_ln', 'gmp');
lgraph = connectLayers(lgraph, 'gap', 'pool_concat/in1');
lgraph = connectLayers(lgraph, 'gmp', 'pool_concat/in2');

%% 6. classification head
classificationHead = [
    fullyConnectedLayer(embedDim, 'Name', 'cls_proj1')
    layerNormalizationLayer('Name', 'cls_ln1')
    reluLayer('Name', 'cls_relu1')
    dropoutLayer(dropout, 'Name', 'cls_drop1')
    fullyConnectedLayer(numClasses, 'Name', 'cls_output')
    softmaxLayer('Name', 'softmax')
    classificationLayer('Name', 'classification')
];
lgraph = addLayers(lgraph, classificationHead);
lgraph = connectLayers(lgraph, 'pool_concat', 'cls_proj1');
end

%% helper: one pre-norm transformer block
function lgraph = addTransformerBlock(lgraph, inputLayerName, blockIdx, numHeads, embedDim, ffnDim, dropout)
blockName = sprintf('enc%d_', blockIdx);

% pre-norm and self-attention
preLN1 = layerNormalizationLayer('Name', [blockName 'pre_ln1']);
lgraph = addLayers(lgraph, preLN1);
lgraph = connectLayers(lgraph, inputLayerName, [blockName 'pre_ln1']);

attnLayer = selfAttentionLayer(numHeads, embedDim, ...
    'Name', [blockName 'attn'], ...
    'DropoutProbability', dropout);
lgraph = addLayers(lgraph, attnLayer);
lgraph = connectLayers(lgraph, [blockName 'pre_ln1'], [blockName 'attn']);

% first residual
add1 = additionLayer(2, 'Name', [blockName 'add1']);
lgraph = addLayers(lgraph, add1);
lgraph = connectLayers(lgraph, inputLayerName, [blockName 'add1/in1']);
lgraph = connectLayers(lgraph, [blockName 'attn'], [blockName 'add1/in2']);

% pre-norm and feed-forward
preLN2 = layerNormalizationLayer('Name', [blockName 'pre_ln2']);
lgraph = addLayers(lgraph, preLN2);
lgraph = connectLayers(lgraph, [blockName 'add1'], [blockName 'pre_ln2']);

ffnLayers = [
    fullyConnectedLayer(ffnDim, 'Name', [blockName 'ffn1'])
    reluLayer('Name', [blockName 'relu'])
    dropoutLayer(dropout, 'Name', [blockName 'ffn_drop'])
    fullyConnectedLayer(embedDim, 'Name', [blockName 'ffn2'])
];
lgraph = addLayers(lgraph, ffnLayers);
lgraph = connectLayers(lgraph, [blockName 'pre_ln2'], [blockName 'ffn1']);

% second residual
add2 = additionLayer(2, 'Name', [blockName 'add2']);
lgraph = addLayers(lgraph, add2);
lgraph = connectLayers(lgraph, [blockName 'add1'], [blockName 'add2/in1']);
lgraph = connectLayers(lgraph, [blockName 'ffn2'], [blockName 'add2/in2']);
end
