% hyperparameters in a struct, an if choosing the head
params.numHeads = 2;
params.keyChannels = 8;
params.task = 'regression';
layers = [sequenceInputLayer(3, Name='in')
          selfAttentionLayer(params.numHeads, params.keyChannels, Name='sa')];
if strcmp(params.task, 'regression')
    layers = [layers; fullyConnectedLayer(1, Name='head')];
else
    layers = [layers; fullyConnectedLayer(4, Name='head'); softmaxLayer];
end
net = dlnetwork(layers);
