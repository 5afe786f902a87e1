function [layers, lgraph] = buildForecaster(numChannels, XTrain, YTrain)
%BUILDFORECASTER  a function file with two outputs; it also trains on data it is given
    layers = [
        sequenceInputLayer(numChannels, 'Name', 'input', 'MinLength', 4)
        fullyConnectedLayer(8, 'Name', 'proj')
        positionEmbeddingLayer(8, 16, 'Name', 'pos')
        additionLayer(2, 'Name', 'add')
        selfAttentionLayer(2, 8, 'AttentionMask', 'causal', 'Name', 'attn')
        indexing1dLayer('last', 'Name', 'last')
        fullyConnectedLayer(1, 'Name', 'out')
        regressionLayer('Name', 'loss')];
    lgraph = layerGraph(layers);
    lgraph = connectLayers(lgraph, 'proj', 'add/in2');
    net = trainNetwork(XTrain, YTrain, lgraph, trainingOptions('adam', 'MaxEpochs', 1));
end
