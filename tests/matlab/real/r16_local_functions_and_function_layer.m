% Pattern: the network built by local functions with arguments blocks (defaults, name-value
% options), a two-input functionLayer gating one branch by another, and an L2 factor set on a
% layer before training on sequences of different lengths.
% MATLAB: options.Name = default in an arguments block makes Name=value arguments; positional
% arguments may have defaults; functionLayer(@(X, Y) ..., NumInputs=2) has inputs in1, in2;
% setL2Factor(layer, "Weights", 0) removes the L2 penalty from that layer's weights.
numFeatures = 3;
net = dlnetwork;
net = addLayers(net, encoder(numFeatures, HiddenUnits=12));
net = addLayers(net, [fullyConnectedLayer(12, Name="gate") sigmoidLayer(Name="sig")]);
net = addLayers(net, [functionLayer(@(X, G) X .* G, NumInputs=2, Name="gated") ...
    fullyConnectedLayer(2, Name="fc_out") softmaxLayer(Name="prob")]);
net = connectLayers(net, "drop", "gate");
net = connectLayers(net, "drop", "gated/in1");
net = connectLayers(net, "sig", "gated/in2");
head = setL2Factor(net.Layers(end-1), "Weights", 0);
net = replaceLayer(net, "fc_out", head);
net = initialize(net);
options = trainingOptions("adam", MaxEpochs=1, MiniBatchSize=2, Verbose=false);
net = trainnet(XTrain, TTrain, net, "crossentropy", options);

function layers = encoder(numFeatures, options)
arguments
    numFeatures (1,1) {mustBePositive}
    options.HiddenUnits (1,1) double = 32
    options.Dropout (1,1) double = 0.1
end
layers = [
    sequenceInputLayer(numFeatures, Name="in")
    lstmLayer(options.HiddenUnits, OutputMode="last", Name="lstm")
    dropoutLayer(options.Dropout, Name="drop")];
end
