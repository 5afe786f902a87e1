% Pattern: temporal convolutional networks copied from MathWorks' sequence-to-sequence example
% into projects, built on a layerGraph: residual blocks added in a loop (dilated causal
% convolutions, unnamed normalisation and dropout layers); this copy connects every block's
% input straight to the block's addition layer — the first block's too, although its
% convolutions turn the input's 3 channels into 64 (the example adds a 1-by-1 convolution on
% that first skip connection); plot(lgraph) and analyzeNetwork(lgraph) in the script.
% Source: MathWorks documentation example, as copied into projects (the skip convolution left out).
% MATLAB: analyzeNetwork reports the network invalid: the addition layer 'add_1' receives inputs
% of different sizes (64 channels from the block, 3 from the input).
% Expect: exit 1 "add_1"
numFeatures = 3;
numClasses = 5;
numFilters = 64;
filterSize = 5;
dropoutFactor = 0.005;
numBlocks = 4;

layer = sequenceInputLayer(numFeatures, Normalization="rescale-symmetric", Name="input");
lgraph = layerGraph(layer);
outputName = layer.Name;

for i = 1:numBlocks
    dilationFactor = 2^(i - 1);
    layers = [
        convolution1dLayer(filterSize, numFilters, DilationFactor=dilationFactor, Padding="causal", Name="conv1_" + i)
        layerNormalizationLayer
        spatialDropoutLayer(Probability=dropoutFactor)
        convolution1dLayer(filterSize, numFilters, DilationFactor=dilationFactor, Padding="causal")
        layerNormalizationLayer
        reluLayer
        spatialDropoutLayer(Probability=dropoutFactor)
        additionLayer(2, Name="add_" + i)];
    lgraph = addLayers(lgraph, layers);
    lgraph = connectLayers(lgraph, outputName, "conv1_" + i);
    % residual connection
    lgraph = connectLayers(lgraph, outputName, "add_" + i + "/in2");
    outputName = "add_" + i;
end

layers = [
    fullyConnectedLayer(numClasses, Name="fc")
    softmaxLayer
    classificationLayer];
lgraph = addLayers(lgraph, layers);
lgraph = connectLayers(lgraph, outputName, "fc");

figure
plot(lgraph)
analyzeNetwork(lgraph)

options = trainingOptions("adam", ...
    MaxEpochs=60, ...
    MiniBatchSize=1, ...
    Plots="training-progress", ...
    Verbose=0);
net = trainNetwork(XTrain, TTrain, lgraph, options);
