% Pattern: a small transformer encoder for sequence classification (MATLAB Answers): position
% embedding added to the input projection, self-attention with a residual and layer norm,
% then the first/last token read out.
% MATLAB: positionEmbeddingLayer(outputSize, maxPosition); additionLayer(2); clean.
numFeatures = 4;
numClasses = 3;
maxPosition = 64;
numHeads = 2;
numKeyChannels = 16;
net = dlnetwork;
net = addLayers(net, [
    sequenceInputLayer(numFeatures, Name="in")
    fullyConnectedLayer(numKeyChannels, Name="proj")
    additionLayer(2, Name="add_pos")
    selfAttentionLayer(numHeads, numKeyChannels, Name="sa")
    additionLayer(2, Name="res")
    layerNormalizationLayer(Name="ln")
    indexing1dLayer("last", Name="last")
    fullyConnectedLayer(numClasses, Name="fc")
    softmaxLayer(Name="sm")]);
net = addLayers(net, positionEmbeddingLayer(numKeyChannels, maxPosition, Name="pos"));
net = connectLayers(net, "proj", "pos");
net = connectLayers(net, "pos", "add_pos/in2");
net = connectLayers(net, "add_pos", "res/in2");
net = initialize(net);
