% Pattern: "Time Series Forecasting Using Deep Learning" (current version): each sequence is
% numTimeSteps-by-numChannels; the targets are the predictors shifted by one step
% (X(1:end-1,:) and X(2:end,:)); all sequences normalised with the mean and standard deviation
% of cat(1, XTrain{:}); an LSTM trained with trainnet, "mse", left padding; open-loop
% predictions on the test sequences, with their RMSE.
% MATLAB: the network is sequenceinput-lstm-fc, clean; numChannels comes from the data
% (analyze: exit 2 naming numChannels).
load WaveformData
numChannels = size(data{1}, 2);
numObservations = numel(data);
idxTrain = 1:floor(0.9 * numObservations);
idxTest = floor(0.9 * numObservations) + 1:numObservations;
dataTrain = data(idxTrain);
dataTest = data(idxTest);

for n = 1:numel(dataTrain)
    X = dataTrain{n};
    XTrain{n} = X(1:end-1, :);
    TTrain{n} = X(2:end, :);
end
muX = mean(cat(1, XTrain{:}), 1);
sigmaX = std(cat(1, XTrain{:}), 0, 1);
muT = mean(cat(1, TTrain{:}), 1);
sigmaT = std(cat(1, TTrain{:}), 0, 1);
for n = 1:numel(XTrain)
    XTrain{n} = (XTrain{n} - muX) ./ sigmaX;
    TTrain{n} = (TTrain{n} - muT) ./ sigmaT;
end

layers = [
    sequenceInputLayer(numChannels)
    lstmLayer(128)
    fullyConnectedLayer(numChannels)];
options = trainingOptions("adam", ...
    MaxEpochs=200, ...
    SequencePaddingDirection="left", ...
    Shuffle="every-epoch", ...
    Plots="training-progress", ...
    Verbose=false);
net = trainnet(XTrain, TTrain, layers, "mse", options);

for n = 1:numel(dataTest)
    X = dataTest{n};
    XTest{n} = (X(1:end-1, :) - muX) ./ sigmaX;
    TTest{n} = (X(2:end, :) - muT) ./ sigmaT;
end
YTest = minibatchpredict(net, XTest, SequencePaddingDirection="left", UniformOutput=false);
for n = 1:numel(XTest)
    err(n) = sqrt(mean((YTest{n} - TTest{n}).^2, "all"));
end
figure
histogram(err)
xlabel("RMSE")
