% 1-D convolution and pooling over time, data from in-memory datastores, trainnet on a
% plain layer array (R2023b+ style).
layers = [
    inputLayer([3 NaN NaN], "CBT", Name="in")
    convolution1dLayer(3, 8, Padding="same")
    reluLayer
    maxPooling1dLayer(2, Stride=2)
    averagePooling1dLayer(2, Padding="same")
    identityLayer(Name="junction")
    scalingLayer(Scale=0.5, Bias=1)
    globalMaxPooling1dLayer
    fullyConnectedLayer(1)];

dsX = arrayDatastore(XTrain, OutputType="same");
dsT = arrayDatastore(TTrain);
ds = combine(dsX, dsT);

opts = trainingOptions("sgdm", MaxEpochs=1, MiniBatchSize=4, Shuffle="never", ...
    Plots="none", Verbose=false);
net = trainnet(ds, layers, "mse", opts);
