% Pattern: spatial dropout between convolutions (GitHub CNN code) and in a 1-D CNN on
% sequences. MATLAB (R2024a+): spatialDropoutLayer drops whole channels, over all pixels or
% time steps, with Probability (default 0.5); MATLAB's default name is 'spatialdrop'.
imgLayers = [
    imageInputLayer([16 16 3], Normalization="none")
    convolution2dLayer(3, 8, Padding="same")
    reluLayer
    spatialDropoutLayer(Probability=0.25)
    convolution2dLayer(3, 8, Padding="same")
    globalAveragePooling2dLayer
    fullyConnectedLayer(2)
    softmaxLayer];
seqLayers = [
    sequenceInputLayer(4)
    convolution1dLayer(3, 6, Padding="causal")
    spatialDropoutLayer
    globalAveragePooling1dLayer
    fullyConnectedLayer(1)];
netImg = dlnetwork(imgLayers);
netSeq = dlnetwork(seqLayers);
