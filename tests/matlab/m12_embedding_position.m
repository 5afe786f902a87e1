% token embedding plus learned positions, causal self-attention
vocab = 20; d = 8; maxLen = 16;
layers = [
    sequenceInputLayer(1, Name="tokens")
    embeddingLayer(d, vocab, Name="emb")
    additionLayer(2, Name="add")
    selfAttentionLayer(2, d, AttentionMask="causal", Name="sa")
    fullyConnectedLayer(vocab, Name="logits")];
net = dlnetwork;
net = addLayers(net, layers);
net = addLayers(net, positionEmbeddingLayer(d, maxLen, Name="pos"));
net = connectLayers(net, "emb", "pos");
net = connectLayers(net, "pos", "add/in2");
