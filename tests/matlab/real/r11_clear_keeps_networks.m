% Pattern: cleaning up at the end of a script ("clear" of temporaries, "clearvars -except").
% MATLAB: clearvars -except keeps the variables listed and clears the rest; 'net' survives.
clear; clc
hiddenSize = 20;
tmp = [fullyConnectedLayer(2)];
net = dlnetwork([featureInputLayer(5) fullyConnectedLayer(hiddenSize) tanhLayer ...
    fullyConnectedLayer(1)]);
clear tmp
results = struct("rmse", 0.1);
clearvars -except net results
