% Pattern: "Time Series Forecasting Using Deep Learning": an LSTM that predicts the next time
% step, trained with trainnet, then closed-loop forecasting with the network's state.
% MATLAB: resetState clears the state; [Y, state] = predict(net, X) starts from net.State and
% returns the state after X; net.State = state keeps it; predictAndUpdateState does both.
% (attnlab's layout: a sequence is T-by-C, time down the rows.)
numChannels = 2;
layers = [
    sequenceInputLayer(numChannels)
    lstmLayer(16)
    fullyConnectedLayer(numChannels)];
options = trainingOptions("adam", MaxEpochs=1, SequencePaddingDirection="left", ...
    Shuffle="every-epoch", Plots="none", Verbose=0);
net = trainnet(XTrain, TTrain, layers, "mse", options);

X = XTest;                           % T-by-C
offset = 5;
numPredictionTimeSteps = 4;
net = resetState(net);
[Z, state] = predict(net, X(1:offset, :));
net.State = state;
Y = zeros(numPredictionTimeSteps, numChannels);
Y(1, :) = Z(end, :);
for t = 2:numPredictionTimeSteps
    [Y(t, :), state] = predict(net, Y(t-1, :));
    net.State = state;
end

net = resetState(net);
[net, Z2] = predictAndUpdateState(net, X(1:offset, :));
Y2 = zeros(numPredictionTimeSteps, numChannels);
Y2(1, :) = Z2(end, :);
for t = 2:numPredictionTimeSteps
    [net, Y2(t, :)] = predictAndUpdateState(net, Y2(t-1, :));
end
