% self-attention over time, then pooling (Name=value style)
numChannels = 6;
layers = [
    sequenceInputLayer(numChannels, Name="in")
    fullyConnectedLayer(16, Name="embed")
    selfAttentionLayer(4, 16, Name="sa")
    layerNormalizationLayer(Name="ln")
    globalAveragePooling1dLayer(Name="pool")
    fullyConnectedLayer(3, Name="fc")
    softmaxLayer(Name="sm")
];
net = dlnetwork(layers);
analyzeNetwork(net)
