% Pattern: the CNN-LSTM forecasting function blogs and Q&A sites pass around
% (func_CNN_LSTM_layer(Nfeat, Nfilter, Nout)): features as Nfeat-by-1-by-1 frames, a
% sequenceFoldingLayer, a 2-D convolution with WeightsInitializer 'he', batch normalisation, ELU,
% averagePooling2dLayer(1, 'Stride', Nfilter), the unfolding layer, flattenLayer, two LSTMs with
% initializers written 'He', a regressionLayer; comments inside the array, one element ended by
% a semicolon; layerGraph and the fold/unfold miniBatchSize connection.
% Source: blog post with the "core program" of a MATLAB R2022a CNN+LSTM time-series example.
% MATLAB: called with its arguments the network is clean, 14 layers (attnlab: 13, the
% regression output becomes the loss). With Nfeat = 8, Nfilter = 3, Nout = 1: conv 3*3*1*32 +
% 32 = 320, batchnorm 64, pooling to 3-by-1-by-32 so flatten gives 96, lstm(128) 4*128*(96 +
% 128) + 512 = 115,200, lstm(32) 4*32*(128 + 32) + 128 = 20,608, fc 33: 136,225 learnables.
% Expect: exit 2 "--set Nfeat=VALUE"
% Expect-with: --set Nfeat=8 --set Nfilter=3 --set Nout=1 -> exit 0 "13 layers" "no issues" learnables=136225
function layers = func_CNN_LSTM_layer(Nfeat, Nfilter, Nout)
layers = [
    % input features
    sequenceInputLayer([Nfeat 1 1])
    sequenceFoldingLayer('Name', 'fold')
    % convolutional feature extraction
    convolution2dLayer(Nfilter, 32, 'Padding', 'same', 'WeightsInitializer', 'he', 'Name', 'conv', 'DilationFactor', 1);
    batchNormalizationLayer
    eluLayer
    averagePooling2dLayer(1, 'Stride', Nfilter)
    % back to sequences
    sequenceUnfoldingLayer('Name', 'unfold')
    flattenLayer
    % LSTM feature learning
    lstmLayer(128, 'Name', 'lstm1', 'RecurrentWeightsInitializer', 'He', 'InputWeightsInitializer', 'He')
    dropoutLayer(0.25)
    % LSTM output
    lstmLayer(32, 'OutputMode', "last", 'Name', 'bil4', 'RecurrentWeightsInitializer', 'He', 'InputWeightsInitializer', 'He')
    dropoutLayer(0.25)
    % fully connected output
    fullyConnectedLayer(Nout)
    regressionLayer
    ];

layers = layerGraph(layers);
layers = connectLayers(layers, 'fold/miniBatchSize', 'unfold/miniBatchSize');
end
