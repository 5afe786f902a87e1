% Pattern: a repository's TCN with CBAM attention for fault classification (a WGAN-augmented
% data set): sizes read from the data, the input layer named "input"+i before any loop has set
% i (so i is the imaginary unit and the name is "input0+1i"), then residual blocks in a loop as in
% MathWorks' TCN example with channel attention beside them (global pooling, two fully connected
% layers, a sigmoid and a multiplicationLayer); the second convolution of each block is given
% 'DilationFactor', 'dilationFactor' — the text, not the variable. (The repository's dropout
% layers came from the older example's custom layer; written here as today's
% spatialDropoutLayer(Probability=...).) Later lines use a 2-D pooling layer on sequences and
% give two layers of one array the same name; MATLAB never gets there.
% Source: GitHub repository.
% MATLAB: the script stops in the first block: convolution1dLayer rejects the DilationFactor
% value 'dilationFactor' (a vector of positive integers is expected).
% Expect: exit 2 "DilationFactor"
% Expect-with: --set numFeatures=3 --set numClasses=4 -> exit 2 "DilationFactor"
load('fault_sequences.mat');            % XTrain, YTrain
numObservations = numel(XTrain)
classes = categories(YTrain);
numClasses = numel(classes)
numFeatures = size(XTrain{1}, 1)

numFilters = 512;
filterSize = 5;
dropoutFactor = 0.005;
numBlocks = 4;

Name_input = "input" + i;
layer = sequenceInputLayer(numFeatures, 'Normalization', "rescale-symmetric", 'Name', Name_input);
lgraph = layerGraph(layer);
outputName = layer.Name;

for i = 1:numBlocks
    dilationFactor = 2^(i - 1);
    name_conv1 = "conv1_" + i;
    name_add = "add_" + i;

    layers = [
        convolution1dLayer(filterSize, numFilters, 'DilationFactor', dilationFactor, 'Padding', "causal", 'Name', name_conv1)
        layerNormalizationLayer
        spatialDropoutLayer(Probability=dropoutFactor)
        convolution1dLayer(filterSize, numFilters, 'DilationFactor', 'dilationFactor', 'Padding', "causal")
        layerNormalizationLayer
        reluLayer
        spatialDropoutLayer(Probability=dropoutFactor, Name="cbam_input" + i)];
    lgraph = addLayers(lgraph, layers);

    % channel attention from average- and max-pooled descriptors
    layers = [
        globalAveragePooling2dLayer('Name', "avg_" + i)
        fullyConnectedLayer(numFilters, 'Name', "fc1_1_" + i)
        fullyConnectedLayer(numFilters, 'Name', "fc1_2_" + i)];
    lgraph = addLayers(lgraph, layers);
    layers = [
        globalMaxPooling2dLayer('Name', "max_" + i)
        fullyConnectedLayer(numFilters, 'Name', "fc2_1_" + i)
        fullyConnectedLayer(numFilters, 'Name', "fc2_2_" + i)
        additionLayer(2, 'Name', "adds_" + i)
        sigmoidLayer('Name', "sigmoid_" + i)
        multiplicationLayer(2, 'Name', "mult_" + i)];
    lgraph = addLayers(lgraph, layers);
    layers = [
        convolution2dLayer(1, 1, 'Name', "conv2d_" + i, 'Padding', "same")
        sigmoidLayer('Name', "sigmoid2_" + i)
        convolution2dLayer(1, 1, 'Name', "conv2d_" + i, 'Padding', "same")
        additionLayer(2, 'Name', name_add)];
    lgraph = addLayers(lgraph, layers);

    lgraph = connectLayers(lgraph, outputName, name_conv1);
    lgraph = connectLayers(lgraph, "cbam_input" + i, "avg_" + i);
    lgraph = connectLayers(lgraph, "cbam_input" + i, "max_" + i);
    lgraph = connectLayers(lgraph, "fc1_2_" + i, "adds_" + i + "/in2");
    lgraph = connectLayers(lgraph, "cbam_input" + i, "mult_" + i + "/in2");
    lgraph = connectLayers(lgraph, "mult_" + i, "conv2d_" + i);
    lgraph = connectLayers(lgraph, outputName, name_add + "/in2");
    outputName = name_add;
end

layers = [
    fullyConnectedLayer(numClasses, 'Name', "fc")
    softmaxLayer('Name', "softmax")
    classificationLayer('Name', "classification")];
lgraph = addLayers(lgraph, layers);
lgraph = connectLayers(lgraph, outputName, "fc");

options = trainingOptions("adam", ...
    'MaxEpochs', 60, ...
    'MiniBatchSize', 1, ...
    'Plots', "training-progress", ...
    'Verbose', 0);
net = trainNetwork(XTrain, YTrain, lgraph, options);
