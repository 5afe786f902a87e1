% Pattern: a Q&A-site question ("time-series prediction, CNN+LSTM: I want to put a CNN in front
% of my LSTM for time-series data, but it keeps failing"): three battery discharge profiles
% loaded one after another from .mat files (the same struct name each time), plotyy of voltage
% and current, the profiles concatenated, mapminmax to [0, 1]; then a convolution2dLayer right
% after sequenceInputLayer(2), with no folding of the sequence into images.
% Source: Q&A site (the question's data preparation; the network as such questions write it).
% MATLAB: analyzeNetwork and trainNetwork report the network invalid: convolution2dLayer 'conv'
% needs input with two spatial dimensions, and sequenceInputLayer(2) gives vectors (channels by
% time steps).
% Expect: exit 1 "conv"
clear all
close all

% training profiles
load('DST_discharge_data.mat');
train_data1 = discharge_data;
train_time1 = train_data1.relativeTime;
train_voltage1 = train_data1.voltage;
train_current1 = train_data1.current;
train_SOC1 = train_data1.SOC;
figure
[AX, H1, H2] = plotyy(train_time1, train_voltage1, train_time1, train_current1);
xlabel('Time (s)')
ylabel(AX(1), 'Voltage (V)')
ylabel(AX(2), 'Current (A)')
title('Profile 1 (training)')

load('FUDS_discharge_data.mat');
train_data2 = discharge_data;
train_voltage2 = train_data2.voltage;
train_current2 = train_data2.current;
train_SOC2 = train_data2.SOC;

load('BJDST_discharge_data.mat');
train_data3 = discharge_data;
train_voltage3 = train_data3.voltage;
train_current3 = train_data3.current;
train_SOC3 = train_data3.SOC;

% all profiles, inputs and output
all_train_voltage = [train_voltage1 train_voltage2 train_voltage3];
all_train_current = [train_current1 train_current2 train_current3];
all_train_SOC = [train_SOC1 train_SOC2 train_SOC3];
all_data_X = [all_train_voltage; all_train_current];
all_data_Y = all_train_SOC;
[norm_all_data_X, inputps] = mapminmax(all_data_X, 0, 1);
[norm_all_data_Y, outputps] = mapminmax(all_data_Y, 0, 1);

numFeatures = 2;
numHiddenUnits = 100;
layers = [
    sequenceInputLayer(numFeatures, 'Name', 'input')
    convolution2dLayer(3, 16, 'Padding', 'same', 'Name', 'conv')
    batchNormalizationLayer('Name', 'bn')
    reluLayer('Name', 'relu')
    lstmLayer(numHiddenUnits, 'Name', 'lstm')
    fullyConnectedLayer(1, 'Name', 'fc')
    regressionLayer('Name', 'output')];

options = trainingOptions('adam', ...
    'MaxEpochs', 100, ...
    'GradientThreshold', 1, ...
    'InitialLearnRate', 0.01, ...
    'LearnRateSchedule', 'piecewise', ...
    'LearnRateDropPeriod', 50, ...
    'LearnRateDropFactor', 0.2, ...
    'Verbose', 0, ...
    'Plots', 'training-progress');
net = trainNetwork(norm_all_data_X, norm_all_data_Y, layers, options);
