%% A script as they come: data loading, preprocessing and plots around the network
clc; clear; close all
warning off
rng(7);
parallel.gpu.rng(7, 'Philox');   % GPU seed (state only)
gpuDevice(1);

raw = readmatrix('measurements.csv');           % skipped by analyze: no files are read
[x, ps] = mapminmax(raw(:, 1:end-1)', 0, 1);     % MATLAB has it; analyze skips it
cv = cvpartition(200, 'HoldOut', 0.2);            % 200 observations
numFeatures = size(x, 1);                        % from data: give it with --set

layers = [ ...
    sequenceInputLayer(numFeatures, 'Name', 'in')
    bilstmLayer(6, 'OutputMode', 'sequence')
    dropoutLayer(0.1)
    bilstmLayer(4, 'OutputMode', 'last')
    fullyConnectedLayer(3)
    softmaxLayer
    classificationLayer];

figure; plot(layerGraph(layers));     % drawn, not kept: 'layers' is still the network

tempNet = [fullyConnectedLayer(2)];
clear tempNet

figure('Position', [100 100 600 200]);
plot(1:10, rand(1, 10), 'r--');
xlabel('step'); ylabel('value'); title('raw data');
legend('show'); grid on; set(gca, 'FontSize', 12);

scores = [];
[best, where] = max(scores);       % max([]) is [] in MATLAB
disp(['features: ', num2str(numFeatures)]);
