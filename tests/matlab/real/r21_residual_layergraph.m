% Pattern: a residual 1-D CNN built as a layerGraph with skip connections (GitHub code),
% converted with dlnetwork after removing the legacy output layer.
% MATLAB: addition's inputs must match (both 32 channels here); the graph is clean.
numFeatures = 6;
numClasses = 5;
lgraph = layerGraph();
tempLayers = [
    sequenceInputLayer(numFeatures, "Name", "input")
    convolution1dLayer(3, 32, "Padding", "causal", "Name", "conv1")
    layerNormalizationLayer("Name", "ln1")
    reluLayer("Name", "relu1")];
lgraph = addLayers(lgraph, tempLayers);
tempLayers = [
    convolution1dLayer(3, 32, "Padding", "causal", "DilationFactor", 2, "Name", "conv2")
    layerNormalizationLayer("Name", "ln2")
    reluLayer("Name", "relu2")];
lgraph = addLayers(lgraph, tempLayers);
tempLayers = [
    additionLayer(2, "Name", "add")
    globalAveragePooling1dLayer("Name", "gap")
    fullyConnectedLayer(numClasses, "Name", "fc")
    softmaxLayer("Name", "softmax")
    classificationLayer("Name", "classoutput")];
lgraph = addLayers(lgraph, tempLayers);
clear tempLayers;
lgraph = connectLayers(lgraph, "relu1", "conv2");
lgraph = connectLayers(lgraph, "relu1", "add/in1");
lgraph = connectLayers(lgraph, "relu2", "add/in2");
lgraph = removeLayers(lgraph, "classoutput");
net = dlnetwork(lgraph);
