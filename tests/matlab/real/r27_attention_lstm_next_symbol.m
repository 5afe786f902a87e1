% Pattern: a public repository's "predict the next element of a recorded sequence" script: every
% prefix of the sequence predicts the symbol after it; a fully connected projection, a
% selfAttentionLayer(4, 256), GELU layers and an LSTM keeping the last step, ending in
% classificationLayer; the prefixes go into a cell array preallocated with XTrain{n-1, 1} = [],
% the labels are categorical; trainingOptions mixes 'Name', value pairs with Name=value;
% trainNetwork, a pause, the model saved with save().
% Source: GitHub repository (a forecasting script, attention variant of its LSTM script).
% MATLAB: analyzeNetwork(layers) is clean, 11 layers (attnlab shows 10: the classification
% output layer becomes the loss). Learnables: fc(100) on 1 channel 200; selfAttention(4, 256) on
% 100 channels 3*(256*100 + 256) + (100*256 + 100) = 103,268; fc(100) twice 10,100 each;
% lstm(128) on 100: 4*128*(100 + 128) + 4*128 = 117,248; fc(9) 1,161: 242,077.
% Expect: exit 0 "10 layers" "no issues" learnables=242077
trainingDataFile = "symbol_sequence_train.mat";
exportName = "NextSymbolModel";

% network layers
layers = [
    sequenceInputLayer(1, "Name", "sequenceinput")
    fullyConnectedLayer(100, "Name", "fc_1")
    selfAttentionLayer(4, 256, "Name", "selfattention")
    fullyConnectedLayer(100, "Name", "fc_2")
    geluLayer("Name", "gelu")
    fullyConnectedLayer(100, "Name", "fc_3")
    geluLayer("Name", "gelu_1")
    lstmLayer(128, "Name", "lstm", "OutputMode", "last")
    fullyConnectedLayer(9, "Name", "fc")
    softmaxLayer("Name", "softmax")
    classificationLayer("Name", "classoutput")];

% the recorded sequence
load(trainingDataFile);

% each prefix is an observation, the element after it its label
XTrain{numel(sequence) - 1, 1} = [];
for k = 1:numel(sequence) - 1
    XTrain{k} = sequence(1:k)';
end
YTrain = categorical(sequence(2:end));

opts = trainingOptions( ...
    "adam", ...
    "InitialLearnRate", 0.01, ...
    "LearnRateSchedule", "piecewise", ...
    "LearnRateDropPeriod", 2, ...
    MaxEpochs=100, ...
    SequencePaddingDirection="left", ...
    Plots="training-progress", ...
    Verbose=0 ...
);

net = trainNetwork(XTrain, YTrain, layers, opts);

disp('Network trained.');
disp('Press any key to continue.');
pause;

save(exportName, "net");
