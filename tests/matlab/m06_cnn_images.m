% small CNN on 8x8 grey images, trained with trainNetwork
inputSize = [8 8 1];
layers = [
    imageInputLayer(inputSize, 'Name', 'img')
    convolution2dLayer(3, 4, 'Padding', 'same', 'Name', 'conv')
    batchNormalizationLayer('Name', 'bn')
    reluLayer('Name', 'relu')
    maxPooling2dLayer(2, 'Stride', 2, 'Name', 'pool')
    fullyConnectedLayer(2, 'Name', 'fc')
    softmaxLayer('Name', 'sm')
    classificationLayer('Name', 'out')];
opts = trainingOptions("sgdm", InitialLearnRate=0.01, MaxEpochs=1, MiniBatchSize=4, ...
    Shuffle="every-epoch", ValidationData={XVal, YVal}, ValidationFrequency=2, ...
    Verbose=false, Plots="training-progress");
net = trainNetwork(XTrain, YTrain, layers, opts);
