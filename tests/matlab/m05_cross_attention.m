% encoder-decoder cross attention (as in the seed answer, smaller)
C = 8; H = 2;
net = dlnetwork;
net = addLayers(net, [sequenceInputLayer(1, Name="dec") ...
                      lstmLayer(8, Name="lstm-dec") ...
                      fullyConnectedLayer(C, Name="q") ...
                      attentionLayer(H, Name="attn")]);
net = addLayers(net, [sequenceInputLayer(1, Name="enc"); lstmLayer(8, Name="lstm-enc")]);
net = addLayers(net, fullyConnectedLayer(C, Name="k"));
net = addLayers(net, fullyConnectedLayer(C, Name="v"));
net = connectLayers(net, "lstm-enc", "k");
net = connectLayers(net, "lstm-enc", "v");
net = connectLayers(net, "k", "attn/key");
net = connectLayers(net, "v", "attn/value");
