% Pattern: "Sequence-to-Sequence Classification Using Deep Learning" (HumanActivity, the
% trainNetwork version): sequences of 3 features with a label per time step (MATLAB's
% layout: features down the rows, one column per step, as in the example's data), an LSTM
% with OutputMode "sequence", classificationLayer, trainNetwork; classify one test sequence and
% compare it step by step.
% MATLAB: analyzeNetwork(layers) is clean: sequenceinput-lstm-fc-softmax-classoutput; the
% sizes are written in the script, so the network is built without the data.
load HumanActivityTrain
XTrain

figure
plot(XTrain{1}')
title("Training Sequence 1, Feature 1")
classes = categories(YTrain{1});
legend(classes, 'Location', 'northwest')

numFeatures = 3;
numHiddenUnits = 200;
numClasses = 5;
layers = [ ...
    sequenceInputLayer(numFeatures)
    lstmLayer(numHiddenUnits, 'OutputMode', 'sequence')
    fullyConnectedLayer(numClasses)
    softmaxLayer
    classificationLayer];
options = trainingOptions('adam', ...
    'MaxEpochs', 60, ...
    'GradientThreshold', 2, ...
    'Verbose', 0, ...
    'Plots', 'none');              % 'training-progress' in the example
net = trainNetwork(XTrain, YTrain, layers, options);

load HumanActivityTest
figure
plot(XTest{1}')
xlabel("Time Step")
legend("Feature " + (1:numFeatures))
title("Test Data")
YPred = classify(net, XTest{1});
acc = sum(YPred == YTest{1}) ./ numel(YTest{1})
figure
plot(YPred, '.-')
hold on
plot(YTest{1})
hold off
