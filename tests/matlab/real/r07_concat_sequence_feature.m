% Pattern: a sequence branch joined to a feature branch without OutputMode="last".
% MATLAB refuses the network: the concatenation's inputs have different formats/sizes.
net = dlnetwork;
net = addLayers(net, [sequenceInputLayer(3, Name="seq") lstmLayer(16, Name="lstm") ...
    concatenationLayer(1, 2, Name="cat") fullyConnectedLayer(1, Name="fc")]);
net = addLayers(net, featureInputLayer(4, Name="feat"));
net = connectLayers(net, "feat", "cat/in2");
