% Pattern: a CNN-LSTM for video (MATLAB Answers): the frames folded into the batch, a
% convolution per frame, unfolded, flattened, then an LSTM.
% MATLAB (before R2024) accepts it. attnlab has no sequences of images to fold: the error says
% why and what to write, and does not tell a script that already flattens to flatten.
inputSize = [32 32 3];
layers = [
    sequenceInputLayer(inputSize, Name="input")
    sequenceFoldingLayer(Name="fold")
    convolution2dLayer(3, 8, Name="conv")
    reluLayer(Name="relu")
    sequenceUnfoldingLayer(Name="unfold")
    flattenLayer(Name="flatten")
    lstmLayer(16, OutputMode="last", Name="lstm")
    fullyConnectedLayer(2, Name="fc")
    softmaxLayer(Name="softmax")];
lgraph = layerGraph(layers);
lgraph = connectLayers(lgraph, "fold/miniBatchSize", "unfold/miniBatchSize");
