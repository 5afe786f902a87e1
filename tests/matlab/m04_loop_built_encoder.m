% layers appended in a for loop, with end+1 and [layers; more]
numBlocks = 2;
d = 8;
layers = sequenceInputLayer(4, Name="x");
layers(end+1) = fullyConnectedLayer(d, Name="proj");
for i = 1:numBlocks
    layers = [layers
        selfAttentionLayer(2, d, Name="sa" + i)
        layerNormalizationLayer(Name=sprintf('ln%d', i))];
end
layers(end+1) = indexing1dLayer("last", Name="last");
net = dlnetwork(layers);
