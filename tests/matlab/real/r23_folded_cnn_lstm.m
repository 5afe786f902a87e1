% Pattern: a CNN-LSTM for video (MATLAB Answers): the frames folded into the batch, a
% convolution per frame, unfolded, flattened, then an LSTM.
% MATLAB (R2019a-R2023b) accepts it, and so does attnlab: each frame arrives flattened
% (B×T×3072, MATLAB's column-major order), the fold makes it a 3×32×32 image for the
% convolution, the unfold puts the frames back into their sequences (padded steps stay out)
% and the flattenLayer after it keeps the sequence for the LSTM.
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
