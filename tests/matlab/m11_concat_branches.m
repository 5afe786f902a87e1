% two branches concatenated: lstm and a pooled path
net = dlnetwork;
net = addLayers(net, [sequenceInputLayer(4, 'Name', 'in'), lstmLayer(6, 'OutputMode', 'last', 'Name', 'lstm'), ...
    concatenationLayer(1, 2, 'Name', 'cat'), fullyConnectedLayer(3, 'Name', 'fc')]);
net = addLayers(net, globalMaxPooling1dLayer('Name', 'gmp'));
net = connectLayers(net, 'in', 'gmp');
net = connectLayers(net, 'gmp', 'cat/in2');
