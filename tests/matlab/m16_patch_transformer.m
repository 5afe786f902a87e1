% A vision transformer in miniature, written as MATLAB's ViT code writes it
imageSize = 8; patch = 4; d = 6;
net = dlnetwork;
tempNet = [
    imageInputLayer([imageSize imageSize 1], "Name", "image")
    patchEmbeddingLayer([patch patch], d, "Name", "patches", "SpatialFlattenMode", "row-major")
    embeddingConcatenationLayer("Name", "cls")];
net = addLayers(net, tempNet);
net = addLayers(net, positionEmbeddingLayer(d, (imageSize/patch)^2 + 1, "Name", "pos"));
tempNet = [
    additionLayer(2, "Name", "add")
    layerNormalizationLayer("Name", "norm", "Epsilon", 1e-6)
    selfAttentionLayer(2, d, "Name", "mha", "NumValueChannels", d, "OutputSize", d)
    geluLayer("Name", "gelu", "Approximation", "tanh")
    swishLayer("Name", "swish")
    indexing1dLayer("first", "Name", "cls_index")
    fullyConnectedLayer(3, "Name", "head")
    softmaxLayer("Name", "softmax")];
net = addLayers(net, tempNet);
clear tempNet;
net = connectLayers(net, "cls", "pos");
net = connectLayers(net, "cls", "add/in2");
net = connectLayers(net, "pos", "add/in1");
net = initialize(net);
