rng(0); tic
try
    bad = lstmLayer(8, 'OutputMode', 'middle');
catch err
    fprintf('could not build: %s\n', err.message);
end
layers = [featureInputLayer(5, 'Name', 'f')
          fullyConnectedLayer(4, 'Name', 'fc', 'WeightLearnRateFactor', 1)
          tanhLayer('Name', 't')
          fullyConnectedLayer(1, 'Name', 'y')];
net = dlnetwork(layers);
elapsed = toc;
