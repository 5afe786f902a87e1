% Pattern: a repository's age-group estimation from smartwatch signals: xlsread, a 4th-order
% Butterworth band-pass (butter, filter) and wavelet features (wavedec, appcoef, detcoef) in
% loops, fitlm R-squared weights, a variable named table; while a transformer was being tried,
% the layer array was commented out line by line and three of its lines stayed live — the last
% ends in "];" with no "[" open. (`table = output1;` names a variable whose assignment is
% commented out too: never reached.)
% Source: GitHub repository.
% MATLAB: the file does not parse, so MATLAB runs none of it; it reports the unbalanced "]" on
% the regressionLayer line ("Invalid expression. ... check for mismatched delimiters.").
% Expect: exit 2 "r45_commented_block_left_bracket.m:80:"
close all
clear all

limit = 12;
[num, txt, raw] = xlsread('Smartwatch Data');
Fs = 100;
T = 1/Fs;

age = num(1:end, 2:2);
features = num(1:end, 5:end);

% band-pass each recording
for i = 1:size(features, 1)
    signal = features(i, :);
    fs = 500;
    order = 4;
    f_low = 4.9;
    f_high = 5;
    Wn = [f_low f_high] / (fs/2);
    [b, a] = butter(order, Wn, 'bandpass');
    filtsig = filter(b, a, signal);
    features_raw(i, :) = filtsig;
end

% wavelet features and their weight from a linear fit
for i = 1:size(features_raw, 1)
    signal = features_raw(i, :);
    [C, L] = wavedec(signal, 4, 'db4');
    E = appcoef(C, L, 'db4');
    [d1, d2, d3, d4] = detcoef(C, L, [1 2 3 4]);
    featuresdb4(i, :) = [E, d1, d2, d3, d4];
end
mdl = fitlm(featuresdb4, age);
f4 = mdl.Rsquared.ordinary*1e4;

table = cat(2, featuresdb4*1);
table = features_raw;
% for s = 1:size(table, 1)
%     output1(s, :) = maxpool1 - std(maxpool1);
% end
table = output1;

numFeatures = size(table, 2);
numResponses = 1;
numHiddenUnits = 1000;

XTrain = table(1:43, 1:end);
YTrain = age(1:43, 1:end);
XTest = table(44:end, 1:end);
YTest = age(44:end, 1:end);
XTrai = transpose(XTrain);
YTrai = transpose(YTrain);
XTes = transpose(XTest);

for i = 1:size(YTrai, 2)
    if (YTrai(i) < limit)
        YTrai(i) = 1;
    else
        YTrai(i) = 2;
    end
end

% embeddingDim = 128;   % token embedding size
% numHeads = 8;         % attention heads
% layers = [ ...
%   sequenceInputLayer(numFeatures)
% flattenLayer
 lstmLayer(numHiddenUnits)
fullyConnectedLayer(numResponses)
 regressionLayer];
options = trainingOptions('adam', ...
    'MaxEpochs', 50, ...
    'GradientThreshold', 1, ...
    'InitialLearnRate', 0.1, ...
    'LearnRateSchedule', 'piecewise', ...
    'LearnRateDropPeriod', 125, ...
    'LearnRateDropFactor', 0.01, ...
    'Verbose', false, ...
    'Plots', 'training-progress');

net = trainNetwork(XTrai, YTrai, layers, options);
test_outcome = round(predict(net, XTes));
scatter(YTest, test_outcome);
Accuracy = (size(find(test_outcome == transpose(YTest)), 2) / size(YTest, 1)) * 100
