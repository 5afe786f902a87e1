numChannels = 256;
numHeads = 8;

net = dlnetwork;

% Set up the decoder
% It has its own sequenceInputLayer
% Also the query for attentionLayer comes from the output of the decoder
layers = [
    sequenceInputLayer(1, Name="decoder-input")
    lstmLayer(64, 'OutputMode', 'sequence', Name='lstm-decoder')
    layerNormalizationLayer(Name='layernorm_decoder')
    fullyConnectedLayer(numChannels, Name="query")
    attentionLayer(numHeads,Name="cross-attention")];

net = addLayers(net,layers);

% Set up the encoder
% It has its own sequenceInputLayer
layers = [
    sequenceInputLayer(1, Name="encoder-input")
    lstmLayer(64, 'OutputMode', 'sequence', Name='lstm-encoder')
    layerNormalizationLayer(Name='key-value')
    % Add a fully connected layer to extract the key
    fullyConnectedLayer(numChannels,Name="fc-key")];

net = addLayers(net,layers);
% Connect the key layer to the attention layer's key input
net = connectLayers(net,"fc-key","cross-attention/key");

% Add a fully-connected layer to extract the value
net = addLayers(net, fullyConnectedLayer(numChannels,Name="fc-value"));
% Connect the added layer with the key-value layer to extract the value
net = connectLayers(net,"key-value","fc-value");
% Connect the value layer to the attention layer's value input
net = connectLayers(net,"fc-value","cross-attention/value");
plot(net)
