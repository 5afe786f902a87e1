% Pattern: a block of layers repeated with repmat, and one layer object put twice in an array
% (GitHub CNN and LSTM-stack code). MATLAB: a layer is a value, so each use is a copy; the
% copies get MATLAB's default names (fc, fc_1, ...; relu, relu_1, ...), and repmat(block, 1, 3)
% is the block three times, in order.
block = [
    fullyConnectedLayer(16)
    reluLayer];
act = reluLayer;
layers = [
    featureInputLayer(10)
    repmat(block, 3, 1)
    fullyConnectedLayer(8)
    act
    fullyConnectedLayer(8)
    act
    fullyConnectedLayer(1)];
net = dlnetwork(layers);
