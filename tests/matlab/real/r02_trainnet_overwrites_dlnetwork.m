% Pattern: a dlnetwork built, then trained with trainnet into the same variable.
% MATLAB: trainnet returns the trained dlnetwork; 'net' still holds the whole network
% (its architecture unchanged), so the analysis is of that network.
numChannels = 3;
layers = [
    sequenceInputLayer(numChannels)
    lstmLayer(32)
    fullyConnectedLayer(numChannels)];
net = dlnetwork(layers);

options = trainingOptions("adam", MaxEpochs=30, Verbose=false, Plots="none");
net = trainnet(XTrain, TTrain, net, "mse", options);
YTest = minibatchpredict(net, XTest);
