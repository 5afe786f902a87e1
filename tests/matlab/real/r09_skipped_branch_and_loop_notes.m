% Pattern: MathWorks examples' "doTraining" switch, a GPU branch, and a validation loop.
% MATLAB: with doTraining false the pretrained network is loaded (not modelled here); the
% 'if canUseGPU' branch only moves the network to the GPU (initialize keeps the architecture);
% the loop's statements are one statement each, whatever the number of iterations.
numFeatures = 6;
layers = [
    sequenceInputLayer(numFeatures, Normalization="zscore")
    gruLayer(24, OutputMode="last")
    fullyConnectedLayer(4)
    softmaxLayer];
net = dlnetwork(layers);
if canUseGPU
    net = initialize(net);
end
doTraining = true;
if doTraining
    options = trainingOptions("adam", MaxEpochs=1, MiniBatchSize=4, Verbose=false);
    net = trainnet(XTrain, TTrain, net, "crossentropy", options);
else
    load("trainedGRU.mat", "net");
end
accuracy = zeros(1, 3);
for k = 1:3
    scores = minibatchpredict(net, XVal{k});
    accuracy(k) = mean(scores2label(scores, classNames) == TVal{k});
end
