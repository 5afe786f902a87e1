% Pattern: "Sequence Classification Using Deep Learning" (current version, Waveform data):
% `load WaveformData` gives a cell array of numTimeSteps-by-numChannels sequences and their
% labels; the channel and class counts are read from the data; a helper from another file
% (trainingPartitions) splits it; a BiLSTM with OutputMode "last" is trained with trainnet;
% minibatchpredict and scores2label give the test labels.
% MATLAB: the network is sequenceinput-bilstm-fc-softmax, clean; its sizes come from the data,
% so without the data it cannot be built (analyze: exit 2 naming numChannels and numClasses).
load WaveformData
numChannels = size(data{1}, 2);
classNames = categories(labels);

figure
tiledlayout(2, 2)
for i = 1:4
    nexttile
    stackedplot(data{i}, DisplayLabels="Channel " + string(1:numChannels))
    xlabel("Time Step")
    title("Class: " + string(labels(i)))
end

numObservations = numel(data);
[idxTrain, idxValidation, idxTest] = trainingPartitions(numObservations, [0.8 0.1 0.1]);
XTrain = data(idxTrain);
TTrain = labels(idxTrain);
XValidation = data(idxValidation);
TValidation = labels(idxValidation);
XTest = data(idxTest);
TTest = labels(idxTest);

numHiddenUnits = 120;
numClasses = numel(classNames);
layers = [
    sequenceInputLayer(numChannels)
    bilstmLayer(numHiddenUnits, OutputMode="last")
    fullyConnectedLayer(numClasses)
    softmaxLayer];

options = trainingOptions("adam", ...
    MaxEpochs=200, ...
    InitialLearnRate=0.002, ...
    GradientThreshold=1, ...
    Shuffle="never", ...
    Plots="training-progress", ...
    Metrics="accuracy", ...
    Verbose=false);
net = trainnet(XTrain, TTrain, layers, "crossentropy", options);

scores = minibatchpredict(net, XTest);
YTest = scores2label(scores, classNames);
acc = mean(YTest == TTest);
figure
confusionchart(TTest, YTest)
