% Pattern: datastores, figures, tiled layouts with property sets and method calls around a
% dlnetwork built with method syntax. MATLAB: these are ordinary objects; the network is 'net'.
ds = arrayDatastore(XTrain, IterationDimension=3);
ds.ReadSize = 64;
f = figure;
f.Position = [100 100 800 400];
t = tiledlayout(2, 1);
t.TileSpacing = "compact";
ax = nexttile;
ax.YLim = [0 1];

net = dlnetwork;
net = net.addLayers([imageInputLayer([28 28 1], Normalization="none") ...
    convolution2dLayer(3, 8, Padding="same") ...
    reluLayer ...
    globalAveragePooling2dLayer ...
    fullyConnectedLayer(10) ...
    softmaxLayer]);
net = initialize(net);
