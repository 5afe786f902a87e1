%{
  A residual block built with layerGraph and connectLayers,
  the pre-dlnetwork style many forum answers use.
%}
layers = [
    featureInputLayer(8,'Name','input')
    fullyConnectedLayer(8,'Name','fc1')
    reluLayer('Name','relu1')
    additionLayer(2,'Name','add')
    fullyConnectedLayer(2,'Name','out')];
lgraph = layerGraph(layers);
lgraph = connectLayers(lgraph, 'input', 'add/in2');
