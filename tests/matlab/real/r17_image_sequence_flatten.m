% Pattern: video or image-sequence classification (MATLAB Answers, GitHub): a sequence input
% of h-by-w-by-c frames, flattened per time step, then an LSTM.
% MATLAB: sequenceInputLayer([h w c]) takes image sequences; flattenLayer turns each frame
% into h*w*c features ("CBT"), so the LSTM sees 28*28*1 = 784 inputs per step.
inputSize = [28 28 1];
numHiddenUnits = 32;
numClasses = 4;
layers = [
    sequenceInputLayer(inputSize, Name="frames")
    flattenLayer(Name="flat")
    lstmLayer(numHiddenUnits, OutputMode="last")
    fullyConnectedLayer(numClasses)
    softmaxLayer];
net = dlnetwork(layers);
