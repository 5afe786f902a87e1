% Pattern: an older example's layer array (ending in regressionLayer) handed to dlnetwork.
% MATLAB refuses: "Layers must not contain output layers" — use trainnet with a loss instead.
layers = [
    sequenceInputLayer(1)
    lstmLayer(50)
    fullyConnectedLayer(1)
    regressionLayer];
net = dlnetwork(layers);
