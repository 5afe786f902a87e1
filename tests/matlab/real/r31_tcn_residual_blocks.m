% Pattern: "Sequence-to-Sequence Classification Using 1-D Convolutions" (a temporal
% convolutional network labelling every time step of accelerometer recordings): data and sizes
% from a .mat file (numel, categories of the first label sequence, size of the first sequence),
% a plot of one recording, then a loop that adds residual blocks to a dlnetwork with addLayers
% and connectLayers: dilated causal convolution1dLayers, unnamed layerNormalization, spatial
% dropout and relu layers in every block (MATLAB names them uniquely), an additionLayer whose
% skip input is a 1-by-1 convolution in the first block only; trainnet with
% InputDataFormats="CTB", minibatchpredict with UniformOutput=false, onehotdecode per sequence.
% Source: MathWorks documentation example.
% MATLAB: clean, 36 layers (attnlab: 37, its rescale-symmetric input normalisation is a layer of
% its own); numFeatures and numClasses come from the data. With 3 features and 5
% classes: block 1 (5*3*64 + 64) + 128 + (5*64*64 + 64) + 128 = 21,824, skip 1*3*64 + 64 = 256,
% blocks 2-4 41,344 each, fc 5*64 + 5 = 325: 146,437 learnables.
% Expect: exit 2 "--set numFeatures=VALUE" "--set numClasses=VALUE"
% Expect-with: --set numFeatures=3 --set numClasses=5 -> exit 0 "37 layers" "no issues" learnables=146437
s = load("HumanActivityTrain.mat");
XTrain = s.XTrain;
TTrain = s.YTrain;

numObservations = numel(XTrain)
classes = categories(TTrain{1});
numClasses = numel(classes)
numFeatures = size(s.XTrain{1}, 1)

% one recording and its activity labels
figure
for i = 1:3
    X = s.XTrain{1}(i, :);
    subplot(4, 1, i)
    plot(X)
    ylabel("Feature " + i + newline + "Acceleration")
end
subplot(4, 1, 4)
hold on
plot(s.YTrain{1})
hold off
xlabel("Time Step")
ylabel("Activity")

numFilters = 64;
filterSize = 5;
dropoutFactor = 0.005;
numBlocks = 4;

net = dlnetwork;
layer = sequenceInputLayer(numFeatures, Normalization="rescale-symmetric", Name="input");
net = addLayers(net, layer);
outputName = layer.Name;

for i = 1:numBlocks
    dilationFactor = 2^(i - 1);

    layers = [
        convolution1dLayer(filterSize, numFilters, DilationFactor=dilationFactor, Padding="causal", Name="conv1_" + i)
        layerNormalizationLayer
        spatialDropoutLayer(Probability=dropoutFactor)
        convolution1dLayer(filterSize, numFilters, DilationFactor=dilationFactor, Padding="causal")
        layerNormalizationLayer
        reluLayer
        spatialDropoutLayer(Probability=dropoutFactor)
        additionLayer(2, Name="add_" + i)];

    net = addLayers(net, layers);
    net = connectLayers(net, outputName, "conv1_" + i);

    % the skip connection; the first block changes the channel count, so it gets a 1x1 conv
    if i == 1
        layer = convolution1dLayer(1, numFilters, Name="convSkip");
        net = addLayers(net, layer);
        net = connectLayers(net, outputName, "convSkip");
        net = connectLayers(net, "convSkip", "add_" + i + "/in2");
    else
        net = connectLayers(net, outputName, "add_" + i + "/in2");
    end

    outputName = "add_" + i;
end

layers = [
    fullyConnectedLayer(numClasses, Name="fc")
    softmaxLayer];
net = addLayers(net, layers);
net = connectLayers(net, outputName, "fc");

options = trainingOptions("adam", ...
    MaxEpochs=60, ...
    MiniBatchSize=1, ...
    InputDataFormats="CTB", ...
    Plots="training-progress", ...
    Metrics="accuracy", ...
    Verbose=0);
net = trainnet(XTrain, TTrain, net, "crossentropy", options);

s = load("HumanActivityTest.mat");
XTest = s.XTest;
TTest = s.YTest;
YTest = minibatchpredict(net, XTest, InputDataFormats="CTB", MiniBatchSize=1, UniformOutput=false);
for i = 1:numel(YTest)
    YTest{i} = onehotdecode(YTest{i}, classes, 1)';
end
acc = mean(cat(1, YTest{:}) == cat(1, TTest{:}))
