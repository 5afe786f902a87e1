% Pattern: a sensor-sequence classifier moved from trainNetwork to trainnet (trainNetwork is "not
% recommended" since R2024a, and MATLAB Answers has many questions from this move): the layer
% array keeps its softmaxLayer and classificationLayer and is handed to trainnet with
% "crossentropy"; minibatchpredict, scores2label and an accuracy follow.
% Source: GitHub repository's model file (its earlier trainNetwork version), as migrated.
% MATLAB: trainnet refuses the layers: they contain an output layer (the classificationLayer,
% 'classoutput'); the loss is trainnet's argument, so the output layer has to go.
% Expect: exit 1 "output layer"
load("surface_dataset.mat", "dataset_train", "dataset_test");

layers = [
    sequenceInputLayer(2, MinLength=50)
    convolution1dLayer(3, 32, Stride=1, Padding=0)
    batchNormalizationLayer
    reluLayer
    globalMaxPooling1dLayer     % had to switch to a global pool
    fullyConnectedLayer(5)
    softmaxLayer
    classificationLayer];

options = trainingOptions("adam", ...
    InitialLearnRate=1e-3, ...
    MaxEpochs=60, ...
    MiniBatchSize=32, ...
    Shuffle="every-epoch", ...
    Verbose=false);

net = trainnet(dataset_train.sequences, dataset_train.labels, layers, "crossentropy", options);

scores = minibatchpredict(net, dataset_test.sequences);
classNames = categories(dataset_train.labels);
YPred = scores2label(scores, classNames);
accuracy = mean(YPred == dataset_test.labels)
